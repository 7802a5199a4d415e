#!/bin/bash
for i in 1 2 3 4 5; do
  for v in ts-851cc32 ts-nt3; do
    [ $((i % 2)) = 0 ] && v=$([ $v = ts-nt3 ] && echo ts-851cc32 || echo ts-nt3)
    r=$(/work/bin/$v bench -m /work/models/moe30b.gguf -t 2 -p 512 -n 0 -r 1 2>/dev/null | grep pp512 | awk -F'|' '{print $8}')
    echo "moe30b pp512 $i $v $r $(cut -d' ' -f1 /proc/loadavg)"
  done
done
for i in 1 2 3 4 5; do
  for v in ts-851cc32 ts-nt3; do
    [ $((i % 2)) = 0 ] && v=$([ $v = ts-nt3 ] && echo ts-851cc32 || echo ts-nt3)
    r=$(/work/bin/$v bench -m /root/.cache/turbospark/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf -t 2 -p 512 -n 0 -r 1 2>/dev/null | grep pp512 | awk -F'|' '{print $8}')
    echo "q15 pp512 $i $v $r $(cut -d' ' -f1 /proc/loadavg)"
  done
done
