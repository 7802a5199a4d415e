/* src/base: the per-thread error message (ts_fail given its own message as
 * an argument, ts_error_prefix) and the mapping checks behind the CLI's
 * SIGBUS line (ts_map_check, ts_map_name_at). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "gguf/gguf.h"
#include "test_util.h"

static void test_fail_self_argument(void) {
    /* vsnprintf into the buffer it reads from garbled this ("x: x: x: ...") */
    ts_fail(TS_ERR_IO, "sampler: every logit is -inf or NaN");
    ts_status st = ts_fail(TS_ERR_ARG, "x: %s", ts_last_error());
    CHECK(st == TS_ERR_ARG);
    CHECKF(!strcmp(ts_last_error(), "x: sampler: every logit is -inf or NaN"), "[%s]", ts_last_error());
    /* twice, and after the format's own text */
    ts_fail(TS_ERR_IO, "abc");
    ts_fail(TS_ERR_IO, "%s-%s!", ts_last_error(), ts_last_error());
    CHECKF(!strcmp(ts_last_error(), "abc-abc!"), "[%s]", ts_last_error());
    /* a message near the buffer size: truncated, never overrun, prefix intact */
    char big[2000];
    memset(big, 'm', sizeof big - 1);
    big[sizeof big - 1] = 0;
    ts_fail(TS_ERR_IO, "%s", big);
    ts_fail(TS_ERR_IO, "ctx: %s", ts_last_error());
    const char *e = ts_last_error();
    size_t n = strlen(e);
    CHECKF(n == 1023, "length %zu", n);
    CHECK(!strncmp(e, "ctx: mmm", 8));
    CHECK(e[n - 1] == 'm');
}

static void test_error_prefix(void) {
    ts_fail(TS_ERR_IO, "cannot open");
    ts_error_prefix("%s", "model.gguf");
    CHECKF(!strcmp(ts_last_error(), "model.gguf: cannot open"), "[%s]", ts_last_error());
    ts_clear_error();
    CHECK(ts_last_error()[0] == 0);
}

static char tmpdir[256];

static void make_file(const char *path, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    char page[4096];
    memset(page, 7, sizeof page);
    for (size_t at = 0; at < size; at += sizeof page) {
        size_t k = size - at < sizeof page ? size - at : sizeof page;
        CHECK(write(fd, page, k) == (ssize_t)k);
    }
    close(fd);
}

/* the child's SIGBUS handler: async-signal-safe calls only */
static int handler_fd = -1;
static void handler(int sig, siginfo_t *si, void *u) {
    (void)sig;
    (void)u;
    const char *name = ts_map_name_at(si->si_addr);
    if (name) {
        size_t n = 0;
        while (name[n]) n++;
        if (write(handler_fd, name, n) < 0) _exit(8);
        _exit(7);
    }
    _exit(9);
}

static void test_map_check(void) {
    long pg = sysconf(_SC_PAGESIZE);
    char path[512];
    snprintf(path, sizeof path, "%s/three-pages.bin", tmpdir);
    make_file(path, (size_t)(3 * pg));
    ts_mapped_file m;
    CHECKF(ts_map_file(path, &m) == TS_OK, "%s", ts_last_error());
    CHECK(m.size == (uint64_t)(3 * pg));
    CHECK(ts_map_check(&m, path) == TS_OK);
    /* the table names the file for any address inside the mapping, no other */
    CHECK(ts_map_name_at(m.data) && !strcmp(ts_map_name_at(m.data), path));
    CHECK(ts_map_name_at(m.data + m.size - 1) && !strcmp(ts_map_name_at(m.data + m.size - 1), path));
    CHECK(ts_map_name_at(m.data + m.size) == NULL);
    CHECK(ts_map_name_at(m.data - 1) == NULL);
    CHECK(ts_map_name_at(NULL) == NULL);
    /* growing is harmless: every mapped byte is still there */
    CHECK(truncate(path, 4 * pg) == 0);
    CHECK(ts_map_check(&m, path) == TS_OK);

    /* shrunk: a clear error naming the file and both sizes */
    CHECK(truncate(path, pg) == 0);
    ts_status st = ts_map_check(&m, path);
    CHECK(st == TS_ERR_IO);
    const char *e = ts_last_error();
    CHECKF(strstr(e, path) && strstr(e, "changed size under the mapping") && strstr(e, "truncated?"), "[%s]", e);
    char sizes[64];
    snprintf(sizes, sizeof sizes, "%ld bytes mapped, %ld now", 3 * pg, pg);
    CHECKF(strstr(e, sizes) != NULL, "[%s] lacks [%s]", e, sizes);

    /* what the check predicts: touching the lost tail raises SIGBUS, and a
     * handler finds the file from si_addr (the CLI's handler, reduced) */
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        handler_fd = fds[1];
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO;
        sa.sa_sigaction = handler;
        sigaction(SIGBUS, &sa, NULL);
        volatile uint8_t sink = m.data[2 * pg + 5];
        (void)sink;
        _exit(3); /* no SIGBUS: the premise is wrong */
    }
    close(fds[1]);
    char got[600] = {0};
    ssize_t r = read(fds[0], got, sizeof got - 1);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 7, "child status %#x", status);
    CHECKF(r > 0 && !strcmp(got, path), "handler named [%s]", got);

    ts_unmap_file(&m);
    CHECK(m.data == NULL && m.fd == -1);
    /* the file is gone from the table with its mapping */
    unlink(path);
}

static void test_map_registry(void) {
    /* more live mappings than the table holds: all map fine; those past the
     * table are just not named; freed slots are reused */
    enum { N = TS_MAP_REGISTRY + 8 };
    ts_mapped_file m[N];
    char paths[N][512];
    int named = 0;
    for (int i = 0; i < N; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/f%02d.bin", tmpdir, i);
        make_file(paths[i], 100);
        CHECKF(ts_map_file(paths[i], &m[i]) == TS_OK, "%s", ts_last_error());
        const char *n = ts_map_name_at(m[i].data + 50);
        if (n) {
            CHECK(!strcmp(n, paths[i]));
            named++;
        }
    }
    CHECKF(named == TS_MAP_REGISTRY, "%d named", named);
    for (int i = 0; i < N; i++) {
        const uint8_t *d = m[i].data;
        ts_unmap_file(&m[i]);
        CHECK(ts_map_name_at(d) == NULL);
    }
    ts_mapped_file again;
    CHECK(ts_map_file(paths[0], &again) == TS_OK);
    CHECK(ts_map_name_at(again.data) && !strcmp(ts_map_name_at(again.data), paths[0]));
    ts_unmap_file(&again);
    for (int i = 0; i < N; i++) unlink(paths[i]);

    /* a path longer than the table's name keeps its tail (the file name) */
    char deep[TS_MAP_NAME_MAX + 300];
    int at = snprintf(deep, sizeof deep, "%s", tmpdir);
    while (at < TS_MAP_NAME_MAX + 100) {
        at += snprintf(deep + at, sizeof deep - (size_t)at, "/dddddddddddddddddddddddddddddddddddddddddddddddd");
        CHECK(mkdir(deep, 0700) == 0 || errno == EEXIST);
    }
    snprintf(deep + at, sizeof deep - (size_t)at, "/model.gguf");
    make_file(deep, 10);
    ts_mapped_file lm;
    CHECKF(ts_map_file(deep, &lm) == TS_OK, "%s", ts_last_error());
    const char *n = ts_map_name_at(lm.data);
    CHECK(n && strlen(n) == TS_MAP_NAME_MAX - 1);
    CHECK(n && !strcmp(n + strlen(n) - 11, "/model.gguf"));
    ts_unmap_file(&lm);
    unlink(deep);

    /* a caller buffer (fd -1) is always whole */
    ts_mapped_file mem = {.data = (const uint8_t *)"abc", .size = 3, .fd = -1};
    CHECK(ts_map_check(&mem, "mem") == TS_OK);
}

/* Callers that add context must not repeat what the message already says:
 * ts_vocab_load prefixed the path to tok_load's messages, which start with it. */
static void test_context_once(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/no-tokenizer.gguf", tmpdir);
    gguf_writer *w = gguf_writer_new(3, 0);
    gguf_w_str(w, "general.architecture", "llama");
    CHECK(gguf_writer_write(w, path) == TS_OK);
    gguf_writer_free(w);
    ts_vocab *v = NULL;
    CHECK(ts_vocab_load(path, &v) == TS_ERR_FORMAT);
    const char *e = ts_last_error();
    const char *first = strstr(e, path);
    CHECKF(first == e && strstr(first + 1, path) == NULL, "path not said exactly once, first: [%s]", e);
    CHECKF(strstr(e, "tokenizer.ggml.model") != NULL, "[%s]", e);
    ts_vocab_free(v);
    unlink(path);
}

static int dir_count(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* The atomic writer: a commit leaves exactly the new file, with the mode
 * fopen would give; every failure (abort, a rename that cannot happen, a
 * directory that does not exist) leaves nothing but what was there. */
static void test_atomic_file(void) {
    char dir[600], path[700], sub[700];
    snprintf(dir, sizeof dir, "%s/afile", tmpdir);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(path, sizeof path, "%s/out.bin", dir);
    mode_t um = umask(022);
    ts_afile a;
    CHECKF(ts_afile_open(&a, path) == TS_OK, "%s", ts_last_error());
    CHECK(strstr(a.tmp, "/out.bin.tmp.") != NULL && access(path, F_OK) != 0);
    fputs("first", a.f);
    CHECKF(ts_afile_commit(&a) == TS_OK, "%s", ts_last_error());
    CHECK(a.f == NULL && a.tmp == NULL && a.path == NULL);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 5 && (sb.st_mode & 0777) == 0644);
    umask(um);
    /* abort: the old file stays, no temporary is left */
    CHECK(ts_afile_open(&a, path) == TS_OK);
    fputs("second, longer", a.f);
    ts_afile_abort(&a);
    ts_afile_abort(&a); /* a second abort is a no-op */
    CHECK(stat(path, &sb) == 0 && sb.st_size == 5 && dir_count(dir) == 1);
    /* two open at once get different temporaries; the last commit wins */
    ts_afile b;
    CHECK(ts_afile_open(&a, path) == TS_OK && ts_afile_open(&b, path) == TS_OK);
    CHECK(strcmp(a.tmp, b.tmp) != 0);
    fputs("aa", a.f);
    fputs("bbb", b.f);
    CHECK(ts_afile_commit(&a) == TS_OK && ts_afile_commit(&b) == TS_OK);
    CHECK(stat(path, &sb) == 0 && sb.st_size == 3 && dir_count(dir) == 1);
    /* the rename fails (the target is a non-empty directory) */
    snprintf(sub, sizeof sub, "%s/d", dir);
    CHECK(mkdir(sub, 0700) == 0);
    snprintf(path, sizeof path, "%s/d/x", dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    CHECK(fd >= 0 && close(fd) == 0);
    CHECK(ts_afile_open(&a, sub) == TS_OK);
    fputs("data", a.f);
    ts_status st = ts_afile_commit(&a);
    CHECKF(st == TS_ERR_IO && strstr(ts_last_error(), "cannot write") && strstr(ts_last_error(), sub), "%d '%s'", st, ts_last_error());
    CHECK(dir_count(dir) == 2 && dir_count(sub) == 1);
    unlink(path);
    rmdir(sub);
    /* a sticky stream error is reported at commit and nothing is renamed */
    snprintf(path, sizeof path, "%s/err.bin", dir);
    CHECK(ts_afile_open(&a, path) == TS_OK);
    CHECK(fgetc(a.f) == EOF && ferror(a.f)); /* a stream opened "wb" cannot read: sets the error flag */
    fputs("x", a.f);
    st = ts_afile_commit(&a);
    CHECKF(st == TS_ERR_IO && strstr(ts_last_error(), "writing") && strstr(ts_last_error(), "err.bin"), "%d '%s'", st, ts_last_error());
    CHECK(access(path, F_OK) != 0 && dir_count(dir) == 1);
    /* no directory: a clear message, nothing created */
    snprintf(path, sizeof path, "%s/missing/out.bin", dir);
    st = ts_afile_open(&a, path);
    CHECKF(st == TS_ERR_IO && strstr(ts_last_error(), "cannot create") && a.f == NULL && a.tmp == NULL, "%d '%s'", st, ts_last_error());
    CHECK(dir_count(dir) == 1);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/ts_base_XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_fail_self_argument();
    test_error_prefix();
    test_map_check();
    test_map_registry();
    test_context_once();
    test_atomic_file();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return tu_finish();
}
