#include "experts/expert_io.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct io_file {
    int fd;        /* buffered descriptor */
    int dfd;       /* nocache descriptor: O_DIRECT, or (fadvise mode) a private one without readahead; -1 if none */
    bool own_fd;   /* fd was opened here */
    char *name;    /* for messages */
    expert_nocache_mode mode;
} io_file;

typedef struct io_chunk {
    uint64_t off; /* absolute file offset */
    uint64_t len; /* <= chunk_bytes, never crosses a multiple of chunk_bytes */
    uint8_t *dst;
    int file;
    uint64_t req_off, req_len; /* the request it belongs to, for messages */
} io_chunk;

struct expert_io {
    int n_workers;
    uint64_t chunk;     /* chunk_bytes */
    bool nocache;
    bool nocache_fadvise;
    io_file files[EXPERT_IO_MAX_FILES];
    int n_files;
    pthread_t *threads; /* (n_workers) */
    int n_started;
    uint8_t **staging;  /* (n_workers + 1) chunk-sized, EXPERT_IO_ALIGN-aligned; the last is the waiter's; NULL unless nocache */

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* a batch has chunks to take, or stop */
    pthread_cond_t done_cv; /* the last chunk of the batch finished */
    io_chunk *chunks;       /* (chunks_cap) */
    uint64_t chunks_cap;
    uint64_t n_chunks;      /* in the current batch */
    uint64_t next;          /* next chunk to take */
    uint64_t done;          /* chunks finished (read, failed or skipped) */
    bool in_flight;
    bool stop;
    ts_status err;          /* first error of the batch */
    char errmsg[512];
    expert_io_stats stats;
};

const char *expert_nocache_mode_name(expert_nocache_mode m) {
    switch (m) {
    case EXPERT_NOCACHE_OFF: return "off";
    case EXPERT_NOCACHE_DIRECT: return "o_direct";
    case EXPERT_NOCACHE_FADVISE: return "fadvise";
    }
    return "?";
}

void expert_io_config_default(expert_io_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->n_workers = EXPERT_IO_DEFAULT_WORKERS;
    cfg->chunk_bytes = EXPERT_IO_DEFAULT_CHUNK;
}

/* ---- one chunk ---- */

/* Reads until `need` bytes are in or the file ends; *got = bytes read. On a
 * descriptor opened with O_DIRECT a short count that is not block-aligned
 * only happens at end of file, and reading on from there would be an
 * unaligned (EINVAL) read, so it ends the loop too. */
static int pread_upto(int fd, uint8_t *buf, uint64_t len, uint64_t off, uint64_t need, bool direct, uint64_t *got) {
    uint64_t g = 0;
    while (g < need) {
        ssize_t r = pread(fd, buf + g, (size_t)(len - g), (off_t)(off + g));
        if (r < 0) {
            if (errno == EINTR) continue;
            *got = g;
            return errno;
        }
        if (r == 0) break;
        g += (uint64_t)r;
        if (direct && (g % EXPERT_IO_ALIGN) != 0) break;
    }
    *got = g;
    return 0;
}

static uint64_t file_size(int fd) {
    struct stat sb;
    return fstat(fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

typedef struct chunk_acct {
    uint64_t issued, copied;
} chunk_acct;

static ts_status read_chunk(const io_file *f, const io_chunk *c, uint8_t *staging, char *msg, size_t msgn,
                            chunk_acct *acct) {
    const uint64_t A = EXPERT_IO_ALIGN;
    uint64_t a0 = c->off & ~(A - 1), a1 = (c->off + c->len + A - 1) & ~(A - 1);
    uint64_t got = 0;
    int e;
    bool short_read;
    if (f->mode == EXPERT_NOCACHE_DIRECT) {
        if ((c->off % A) == 0 && (c->len % A) == 0 && ((uintptr_t)c->dst % A) == 0) {
            e = pread_upto(f->dfd, c->dst, c->len, c->off, c->len, true, &got);
            acct->issued += c->len;
            short_read = got < c->len;
        } else {
            uint64_t need = c->off + c->len - a0;
            e = pread_upto(f->dfd, staging, a1 - a0, a0, need, true, &got);
            acct->issued += a1 - a0;
            short_read = got < need;
            if (!e && !short_read) {
                memcpy(c->dst, staging + (c->off - a0), c->len);
                acct->copied += c->len;
            }
        }
    } else {
        int fd = f->mode == EXPERT_NOCACHE_FADVISE && f->dfd >= 0 ? f->dfd : f->fd;
        e = pread_upto(fd, c->dst, c->len, c->off, c->len, false, &got);
        acct->issued += c->len;
        short_read = got < c->len;
        if (!e && f->mode == EXPERT_NOCACHE_FADVISE)
            (void)posix_fadvise(fd, (off_t)a0, (off_t)(a1 - a0), POSIX_FADV_DONTNEED);
    }
    if (e) {
        snprintf(msg, msgn, "%s: read of %" PRIu64 " bytes at offset %" PRIu64 " (chunk at %" PRIu64 ")%s failed: %s",
                 f->name, c->req_len, c->req_off, c->off, f->mode == EXPERT_NOCACHE_DIRECT ? " (O_DIRECT)" : "",
                 strerror(e));
        return TS_ERR_IO;
    }
    if (short_read) {
        snprintf(msg, msgn, "%s: read of %" PRIu64 " bytes at offset %" PRIu64 " goes past the end of the file (%" PRIu64
                 " bytes)",
                 f->name, c->req_len, c->req_off, file_size(f->fd));
        return TS_ERR_IO;
    }
    return TS_OK;
}

/* Takes and runs chunks of the current batch until none is left to take.
 * Called with mu held; returns with mu held. */
static void drain(expert_io *io, uint8_t *staging) {
    while (io->next < io->n_chunks) {
        io_chunk c = io->chunks[io->next++];
        bool skip = io->err != TS_OK;
        pthread_mutex_unlock(&io->mu);
        ts_status st = TS_OK;
        char msg[512];
        chunk_acct acct = {0, 0};
        if (!skip) st = read_chunk(&io->files[c.file], &c, staging, msg, sizeof msg, &acct);
        pthread_mutex_lock(&io->mu);
        if (st && io->err == TS_OK) {
            io->err = st;
            snprintf(io->errmsg, sizeof io->errmsg, "%s", msg);
        }
        if (!skip && !st) io->stats.chunks++;
        io->stats.issued_bytes += acct.issued;
        io->stats.copied_bytes += acct.copied;
        if (++io->done == io->n_chunks) pthread_cond_broadcast(&io->done_cv);
    }
}

typedef struct worker_arg {
    expert_io *io;
    int id;
} worker_arg;

static void *worker_main(void *p) {
    expert_io *io = ((worker_arg *)p)->io;
    int id = ((worker_arg *)p)->id;
    free(p);
    uint8_t *staging = io->staging ? io->staging[id] : NULL;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        while (!io->stop && io->next >= io->n_chunks) pthread_cond_wait(&io->work_cv, &io->mu);
        if (io->stop) break;
        drain(io, staging);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

/* ---- pool ---- */

ts_status expert_io_new(const expert_io_config *cfg_in, expert_io **out) {
    *out = NULL;
    expert_io_config cfg;
    if (cfg_in) cfg = *cfg_in;
    else expert_io_config_default(&cfg);
    if (cfg.n_workers < 0) cfg.n_workers = EXPERT_IO_DEFAULT_WORKERS;
    if (cfg.chunk_bytes == 0) cfg.chunk_bytes = EXPERT_IO_DEFAULT_CHUNK;
    if (cfg.n_workers > EXPERT_IO_MAX_WORKERS)
        return ts_fail(TS_ERR_ARG, "expert_io: %d workers (at most %d)", cfg.n_workers, EXPERT_IO_MAX_WORKERS);
    if (cfg.chunk_bytes % EXPERT_IO_ALIGN || cfg.chunk_bytes > (1u << 30))
        return ts_fail(TS_ERR_ARG, "expert_io: chunk of %" PRIu64 " bytes (a multiple of %u up to 1 GiB)", cfg.chunk_bytes,
                       EXPERT_IO_ALIGN);
    expert_io *io = ts_calloc(1, sizeof *io);
    if (!io) return TS_ERR_NOMEM;
    io->n_workers = cfg.n_workers;
    io->chunk = cfg.chunk_bytes;
    io->nocache = cfg.nocache;
    io->nocache_fadvise = cfg.nocache_fadvise;
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->work_cv, NULL);
    pthread_cond_init(&io->done_cv, NULL);
    if (io->nocache) {
        io->staging = ts_calloc((size_t)io->n_workers + 1, sizeof *io->staging);
        if (!io->staging) goto nomem;
        for (int i = 0; i <= io->n_workers; i++) {
            void *b;
            if (posix_memalign(&b, EXPERT_IO_ALIGN, (size_t)io->chunk)) goto nomem;
            io->staging[i] = b;
        }
    }
    if (io->n_workers > 0) {
        io->threads = ts_calloc((size_t)io->n_workers, sizeof *io->threads);
        if (!io->threads) goto nomem;
        for (int i = 0; i < io->n_workers; i++) {
            worker_arg *a = malloc(sizeof *a);
            if (!a) goto nomem;
            a->io = io;
            a->id = i;
            int e = pthread_create(&io->threads[i], NULL, worker_main, a);
            if (e) {
                free(a);
                expert_io_free(io);
                return ts_fail(TS_ERR_INTERNAL, "expert_io: cannot start I/O thread %d: %s", i, strerror(e));
            }
            io->n_started++;
        }
    }
    *out = io;
    return TS_OK;
nomem:
    expert_io_free(io);
    return ts_fail(TS_ERR_NOMEM, "expert_io: out of memory");
}

void expert_io_free(expert_io *io) {
    if (!io) return;
    if (io->in_flight) (void)expert_io_wait(io);
    pthread_mutex_lock(&io->mu);
    io->stop = true;
    pthread_cond_broadcast(&io->work_cv);
    pthread_mutex_unlock(&io->mu);
    for (int i = 0; i < io->n_started; i++) pthread_join(io->threads[i], NULL);
    free(io->threads);
    if (io->staging)
        for (int i = 0; i <= io->n_workers; i++) free(io->staging[i]);
    free(io->staging);
    for (int i = 0; i < io->n_files; i++) {
        io_file *f = &io->files[i];
        if (f->dfd >= 0) close(f->dfd);
        if (f->own_fd && f->fd >= 0) close(f->fd);
        free(f->name);
    }
    free(io->chunks);
    pthread_mutex_destroy(&io->mu);
    pthread_cond_destroy(&io->work_cv);
    pthread_cond_destroy(&io->done_cv);
    free(io);
}

/* O_DIRECT on `reopen` (a path); falls back to fadvise when the open or a
 * probe read is refused. The fadvise fallback reads through a private
 * descriptor marked POSIX_FADV_RANDOM: without readahead a read brings in
 * only its own pages, so dropping its range afterwards leaves nothing of the
 * file behind (with readahead, pages past the range would stay cached). */
static void setup_nocache(expert_io *io, io_file *f, const char *reopen) {
    f->mode = EXPERT_NOCACHE_FADVISE;
    if (!io->nocache_fadvise) {
        int dfd = open(reopen, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (dfd >= 0) {
            /* Some filesystems accept the open and refuse the reads. */
            uint8_t *probe = io->staging[io->n_workers];
            ssize_t r;
            do r = pread(dfd, probe, EXPERT_IO_ALIGN, 0);
            while (r < 0 && errno == EINTR);
            if (r >= 0) {
                f->dfd = dfd;
                f->mode = EXPERT_NOCACHE_DIRECT;
                return;
            }
            close(dfd);
        }
    }
    f->dfd = open(reopen, O_RDONLY | O_CLOEXEC);
    if (f->dfd >= 0) (void)posix_fadvise(f->dfd, 0, 0, POSIX_FADV_RANDOM);
}

static ts_status add_file(expert_io *io, int fd, bool own, const char *name, const char *reopen, int *file_id) {
    io_file *f = &io->files[io->n_files];
    memset(f, 0, sizeof *f);
    f->fd = fd;
    f->dfd = -1;
    f->own_fd = own;
    f->name = strdup(name ? name : "expert file");
    if (!f->name) {
        if (own) close(fd);
        return ts_fail(TS_ERR_NOMEM, "expert_io: out of memory");
    }
    f->mode = EXPERT_NOCACHE_OFF;
    if (io->nocache) setup_nocache(io, f, reopen);
    *file_id = io->n_files++;
    return TS_OK;
}

ts_status expert_io_attach(expert_io *io, const char *path, int *file_id) {
    *file_id = -1;
    if (io->n_files >= EXPERT_IO_MAX_FILES)
        return ts_fail(TS_ERR_LIMIT, "expert_io: %s: more than %d files", path, EXPERT_IO_MAX_FILES);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ts_fail(TS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    return add_file(io, fd, true, path, path, file_id);
}

ts_status expert_io_attach_fd(expert_io *io, int fd, const char *name, int *file_id) {
    *file_id = -1;
    if (io->n_files >= EXPERT_IO_MAX_FILES)
        return ts_fail(TS_ERR_LIMIT, "expert_io: %s: more than %d files", name ? name : "fd", EXPERT_IO_MAX_FILES);
    if (fd < 0 || fcntl(fd, F_GETFD) < 0) return ts_fail(TS_ERR_ARG, "expert_io: %s: bad descriptor %d", name ? name : "fd", fd);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return add_file(io, fd, false, name, proc, file_id);
}

expert_nocache_mode expert_io_nocache_mode(const expert_io *io, int file_id) {
    if (file_id < 0 || file_id >= io->n_files) return EXPERT_NOCACHE_OFF;
    return io->files[file_id].mode;
}

ts_status expert_io_submit(expert_io *io, const expert_io_req *reqs, int n) {
    if (io->in_flight) return ts_fail(TS_ERR_ARG, "expert_io: submit while a batch is in flight");
    if (n < 0 || (n > 0 && !reqs)) return ts_fail(TS_ERR_ARG, "expert_io: bad request count %d", n);
    uint64_t need = 0, bytes = 0;
    for (int i = 0; i < n; i++) {
        const expert_io_req *r = &reqs[i];
        uint64_t end;
        if (r->file < 0 || r->file >= io->n_files)
            return ts_fail(TS_ERR_ARG, "expert_io: request %d: bad file id %d", i, r->file);
        if (r->len == 0) continue;
        if (!r->dst || !ts_add_u64(r->offset, r->len, &end) || end > (uint64_t)INT64_MAX)
            return ts_fail(TS_ERR_ARG, "expert_io: request %d: bad destination or range (offset %" PRIu64 ", %" PRIu64 " bytes)",
                           i, r->offset, r->len);
        need += (end - 1) / io->chunk - r->offset / io->chunk + 3; /* + the two cuts of split_points */
        bytes += r->len;
    }
    if (need > io->chunks_cap) {
        io_chunk *c = realloc(io->chunks, (size_t)need * sizeof *c);
        if (!c) return ts_fail(TS_ERR_NOMEM, "expert_io: out of memory for %" PRIu64 " chunks", need);
        io->chunks = c;
        io->chunks_cap = need;
    }
    pthread_mutex_lock(&io->mu);
    uint64_t k = 0;
    for (int i = 0; i < n; i++) {
        const expert_io_req *r = &reqs[i];
        uint64_t pos = r->offset, end = r->offset + r->len;
        uint8_t *dst = r->dst;
        /* O_DIRECT with the destination congruent to the offset (mod the
         * alignment): cut off the unaligned head and tail as chunks of their
         * own, so everything between is read in place and at most 2 blocks
         * per request go through staging. */
        const uint64_t A = EXPERT_IO_ALIGN;
        uint64_t head = 0, tail = 0;
        if (r->len && io->files[r->file].mode == EXPERT_NOCACHE_DIRECT &&
            ((uintptr_t)dst - r->offset) % A == 0) {
            head = (pos + A - 1) & ~(A - 1);
            tail = end & ~(A - 1);
        }
        while (pos < end) {
            uint64_t boundary = (pos / io->chunk + 1) * io->chunk;
            if (pos < head && head < boundary) boundary = head;
            if (pos < tail && tail < boundary) boundary = tail;
            uint64_t e = end < boundary ? end : boundary;
            io->chunks[k++] = (io_chunk){pos, e - pos, dst, r->file, r->offset, r->len};
            dst += e - pos;
            pos = e;
        }
    }
    io->n_chunks = k;
    io->next = 0;
    io->done = 0;
    io->err = TS_OK;
    io->errmsg[0] = 0;
    io->in_flight = true;
    io->stats.reqs += (uint64_t)n;
    io->stats.requested_bytes += bytes;
    if (k > 0 && io->n_workers > 0) pthread_cond_broadcast(&io->work_cv);
    pthread_mutex_unlock(&io->mu);
    return TS_OK;
}

ts_status expert_io_wait(expert_io *io) {
    if (!io->in_flight) return TS_OK;
    double t0 = ts_now();
    pthread_mutex_lock(&io->mu);
    drain(io, io->staging ? io->staging[io->n_workers] : NULL);
    while (io->done < io->n_chunks) pthread_cond_wait(&io->done_cv, &io->mu);
    ts_status st = io->err;
    char msg[sizeof io->errmsg];
    memcpy(msg, io->errmsg, sizeof msg);
    io->in_flight = false;
    io->n_chunks = io->next = io->done = 0;
    io->err = TS_OK;
    io->stats.batches++;
    io->stats.wait_s += ts_now() - t0;
    pthread_mutex_unlock(&io->mu);
    if (st) return ts_fail(st, "%s", msg);
    return TS_OK;
}

ts_status expert_io_read(expert_io *io, const expert_io_req *reqs, int n) {
    ts_status st = expert_io_submit(io, reqs, n);
    if (st) return st;
    return expert_io_wait(io);
}

int expert_io_workers(const expert_io *io) { return io->n_workers; }
uint64_t expert_io_chunk_bytes(const expert_io *io) { return io->chunk; }

void expert_io_get_stats(const expert_io *io, expert_io_stats *out) {
    pthread_mutex_lock((pthread_mutex_t *)&io->mu);
    *out = io->stats;
    pthread_mutex_unlock((pthread_mutex_t *)&io->mu);
}

void expert_io_reset_stats(expert_io *io) {
    pthread_mutex_lock(&io->mu);
    memset(&io->stats, 0, sizeof io->stats);
    pthread_mutex_unlock(&io->mu);
}

/* ---- /proc/self/io ---- */

ts_status expert_io_proc_read_bytes(uint64_t *out) {
    *out = 0;
    FILE *fp = fopen("/proc/self/io", "r");
    if (!fp) return ts_fail(TS_ERR_UNSUPPORTED, "/proc/self/io: cannot open: %s", strerror(errno));
    char line[128];
    bool found = false;
    while (fgets(line, sizeof line, fp)) {
        if (strncmp(line, "read_bytes:", 11) == 0) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(line + 11, &end, 10);
            if (!errno && end != line + 11) {
                *out = v;
                found = true;
            }
            break;
        }
    }
    fclose(fp);
    if (!found) return ts_fail(TS_ERR_UNSUPPORTED, "/proc/self/io: no read_bytes field");
    return TS_OK;
}

ts_status expert_diskio_sample_now(const expert_io *io, expert_diskio_sample *out) {
    memset(out, 0, sizeof *out);
    if (io) {
        expert_io_stats s;
        expert_io_get_stats(io, &s);
        out->requested_bytes = s.requested_bytes;
    }
    return expert_io_proc_read_bytes(&out->proc_read_bytes);
}
