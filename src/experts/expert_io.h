/* Streaming expert reads: a persistent pool of I/O threads that executes
 * batches of (file, offset, length, destination) reads with pread.
 *
 * The engine submits the reads for one layer's cache misses, computes the
 * experts that hit while the reads run, then waits. Each request is cut into
 * chunks at file offsets that are multiples of chunk_bytes, and the chunks run
 * on the workers in parallel (the waiting thread helps), so one expert of a
 * few MB keeps several reads in flight on an NVMe queue.
 *
 * Alignment. Destinations need no alignment. Buffered reads (the default)
 * pread straight into the destination. With TURBOSPARK_EXPERT_NOCACHE=1 each
 * file gets a second descriptor opened with O_DIRECT, whose reads must have
 * offset, length and buffer aligned to the device's logical block size
 * (EXPERT_IO_ALIGN = 4096 covers 512 and 4096): a chunk whose file offset,
 * length and destination are all 4096-aligned is read straight into the
 * destination; any other chunk reads the enclosing aligned range into the
 * worker's staging buffer (chunk_bytes, page-aligned) and copies the wanted
 * bytes out. Because chunks are cut at multiples of chunk_bytes, an aligned
 * range never outgrows one staging buffer. A caller that places each slice
 * at an address congruent to its file offset modulo 4096 (slot buffers
 * page-aligned, each slice at slot + gap with gap = offset % 4096) gets the
 * request's unaligned head and tail (< 4096 bytes each) cut into chunks of
 * their own and everything else read in place: no copy.
 * If O_DIRECT cannot be used on the file (the open fails, e.g. some tmpfs,
 * or a probe read fails), reads stay buffered, through a private descriptor
 * without readahead (POSIX_FADV_RANDOM), and the read range is dropped from
 * the page cache afterwards with posix_fadvise(POSIX_FADV_DONTNEED);
 * expert_io_nocache_mode() says which one a file got.
 *
 * Errors (I/O error, end of file inside a request) are reported by
 * expert_io_wait() via ts_fail with the file name and offset; the remaining
 * chunks of the batch are skipped, the batch still completes, and the pool is
 * ready for the next batch. Nothing is allocated per batch once the request
 * and chunk arrays have grown to the largest batch seen. One batch is in
 * flight at a time, submitted and waited for by one thread. */
#ifndef TS_EXPERTS_IO_H
#define TS_EXPERTS_IO_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

#define EXPERT_IO_ALIGN 4096u
#define EXPERT_IO_MAX_FILES 16
#define EXPERT_IO_MAX_WORKERS 64
#define EXPERT_IO_DEFAULT_WORKERS 8
#define EXPERT_IO_DEFAULT_CHUNK (512u * 1024u)

typedef enum expert_nocache_mode {
    EXPERT_NOCACHE_OFF = 0,     /* buffered reads through the page cache */
    EXPERT_NOCACHE_DIRECT = 1,  /* O_DIRECT descriptor */
    EXPERT_NOCACHE_FADVISE = 2, /* buffered, then POSIX_FADV_DONTNEED on the range */
} expert_nocache_mode;

const char *expert_nocache_mode_name(expert_nocache_mode m); /* "off" / "o_direct" / "fadvise" */

typedef struct expert_io_config {
    int n_workers;        /* I/O threads; 0 = the waiting thread does all reads; <0 = default */
    uint64_t chunk_bytes; /* multiple of EXPERT_IO_ALIGN; 0 = default */
    bool nocache;         /* TURBOSPARK_EXPERT_NOCACHE */
    bool nocache_fadvise; /* with nocache: skip O_DIRECT, use the fadvise fallback (tests; filesystems where O_DIRECT is slow) */
    bool disk_io;         /* TURBOSPARK_EXPERT_DISK_IO: the engine samples /proc/self/io around its reads */
} expert_io_config;

/* The TURBOSPARK_EXPERT_* variables are the command's business
 * (tools/cli_common.c maps them onto ts_model_opts): the library reads no
 * environment. */
void expert_io_config_default(expert_io_config *cfg);

typedef struct expert_io_req {
    int file;        /* id from expert_io_attach*() */
    uint64_t offset; /* absolute file offset */
    uint64_t len;    /* bytes; 0 is allowed and does nothing */
    void *dst;       /* (len) bytes, any alignment */
} expert_io_req;

typedef struct expert_io_stats {
    uint64_t batches;         /* batches completed */
    uint64_t reqs;            /* requests completed */
    uint64_t chunks;          /* chunks read */
    uint64_t requested_bytes; /* sum of request lengths */
    uint64_t issued_bytes;    /* bytes asked of the kernel (O_DIRECT rounds out to 4096) */
    uint64_t copied_bytes;    /* bytes that went through a staging buffer */
    double wait_s;            /* time spent inside expert_io_wait */
} expert_io_stats;

typedef struct expert_io expert_io;

ts_status expert_io_new(const expert_io_config *cfg, expert_io **out);
/* Waits for a batch in flight, stops the workers, closes attached files. */
void expert_io_free(expert_io *io);

/* Opens path for reading (and, in nocache mode, a second O_DIRECT
 * descriptor) and returns its file id. */
ts_status expert_io_attach(expert_io *io, const char *path, int *file_id);
/* Same for an already open descriptor (e.g. gguf_file's map.fd), which stays
 * the caller's; the O_DIRECT descriptor is reopened via /proc/self/fd. name
 * is for messages. */
ts_status expert_io_attach_fd(expert_io *io, int fd, const char *name, int *file_id);
expert_nocache_mode expert_io_nocache_mode(const expert_io *io, int file_id);

/* Queues n requests and starts them. Fails (TS_ERR_ARG) on a bad file id,
 * a NULL destination, offset+len overflow, or while a batch is in flight. */
ts_status expert_io_submit(expert_io *io, const expert_io_req *reqs, int n);
/* Blocks until the batch is done (helping with its chunks); returns the
 * first error of the batch, TS_OK otherwise (also when nothing is in flight). */
ts_status expert_io_wait(expert_io *io);
/* submit + wait. */
ts_status expert_io_read(expert_io *io, const expert_io_req *reqs, int n);

int expert_io_workers(const expert_io *io);
uint64_t expert_io_chunk_bytes(const expert_io *io);
void expert_io_get_stats(const expert_io *io, expert_io_stats *out);
void expert_io_reset_stats(expert_io *io);

/* ---- physical I/O accounting (TURBOSPARK_EXPERT_DISK_IO) ----
 * read_bytes of /proc/self/io counts bytes this process made the block layer
 * fetch from storage (page-cache hits are free, readahead is counted, O_DIRECT
 * counts what it reads). Sampled next to the requested bytes, the two give
 * the real cost of a run: physical < requested means the page cache served
 * part of it; physical > requested is read amplification. */
typedef struct expert_diskio_sample {
    uint64_t proc_read_bytes; /* /proc/self/io read_bytes */
    uint64_t requested_bytes; /* expert_io_stats.requested_bytes at the same moment */
} expert_diskio_sample;

/* Reads read_bytes from /proc/self/io (TS_ERR_UNSUPPORTED when the file or
 * the field is not there, e.g. a kernel without task I/O accounting). */
ts_status expert_io_proc_read_bytes(uint64_t *out);
/* io may be NULL (requested_bytes = 0). */
ts_status expert_diskio_sample_now(const expert_io *io, expert_diskio_sample *out);

#endif
