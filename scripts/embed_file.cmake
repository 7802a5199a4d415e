# cmake -DIN=FILE -DOUT=FILE.c -P embed_file.cmake: writes FILE's bytes as
# `const unsigned char srv_chat_html[]` (NUL-terminated) and its length.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR bytes "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUT}.tmp "/* generated from src/server/chat.html by scripts/embed_file.cmake: do not edit */\n#include <stddef.h>\nconst unsigned char srv_chat_html[] = {\n${body}0x00};\nconst size_t srv_chat_html_len = ${bytes};\n")
file(RENAME ${OUT}.tmp ${OUT})
