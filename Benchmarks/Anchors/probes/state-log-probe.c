/*
 * state-log-probe.c - what the state log's write costs notifyd's latency, measured by changing only that write,
 * in an unchanged packaged binary (LD_PRELOAD). A design probe, never something to run a daemon with: records it
 * drops or maps this way are not where notifyd's recovery expects them.
 *
 *   cc -O2 -shared -fPIC -o state-log-probe.so state-log-probe.c -ldl
 *   NOTIFYD_PROBE=drop  the log's writes are dropped (the floor: a daemon that persists nothing)
 *   NOTIFYD_PROBE=map   the log is appended through a shared mapping of its file: each batch's records are
 *                       copied into the page cache with no system call, the file extended (fallocate) and its next
 *                       MiB faulted in writable (MADV_POPULATE_WRITE) whenever the copy reaches its end
 *   NOTIFYD_PROBE=prealloc  the log is extended (fallocate, its size too) a MiB ahead of the records, which are
 *                       written with pwrite at the next offset: each write overwrites allocated blocks within the
 *                       file's size, so no write changes the size or allocates (the zero tail is the reader's)
 *   NOTIFYD_PROBE=keepsize  blocks are allocated a MiB ahead (fallocate FALLOC_FL_KEEP_SIZE) and the records
 *                       appended as notifyd appends them: each write still grows the size, never allocates
 *   NOTIFYD_PROBE=ring  the log's pwrite batches are copied into a mapped file (state.log.ring, 2 MiB of resident
 *                       pages) and written to the log once NOTIFYD_PROBE_CHUNK bytes (default 256 KiB) gathered, on
 *                       the broker's thread: what batching the log's writes would cost (no recovery: a probe)
 *
 * Since 1de1f16 notifyd writes its log with pwrite (batches over 512 bytes) and copies smaller ones into a mapping
 * of its own, which no preload sees: on such a binary only `drop` and `ring` apply, to pwrite, so to large batches.
 * Measure the log's cost on a build before 1de1f16 (434a376), as the results of 2026-12-07 do.
 *
 * The state log is told apart by its descriptor's path (…/state.log); every other write goes through. probes/wrap.sh
 * makes a directory whose notifyd runs a binary with it, for latency-pairs.sh.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_close)(int);
static signed char is_log[4096]; /* 0 not looked at, 1 the state log, 2 another file */
static enum { PASS, DROP, MAP, PREALLOC, KEEPSIZE, RING } mode;

/* The mapping of the log being appended to: its file, where the mapping starts, the next record's offset, and how
 * far the file is allocated and faulted in. */
static int mapped_fd = -1, mapping_fd = -1;
static char *mapping;
static long mapping_start, head, prepared;
#define SPAN (1L << 30)
#define STEP (1L << 20)

static void setup(void)
{
	const char *probe = getenv("NOTIFYD_PROBE");

	real_write = dlsym(RTLD_NEXT, "write");
	real_close = dlsym(RTLD_NEXT, "close");
	mode = !probe ? PASS : !strcmp(probe, "drop") ? DROP : !strcmp(probe, "map") ? MAP :
	       !strcmp(probe, "prealloc") ? PREALLOC : !strcmp(probe, "keepsize") ? KEEPSIZE : !strcmp(probe, "ring") ? RING : PASS;
}

static int log_descriptor(int fd)
{
	char link[64], path[512];
	ssize_t n;

	if (fd < 0 || fd >= 4096)
		return 0;
	if (!is_log[fd]) {
		snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
		n = readlink(link, path, sizeof path - 1);
		path[n > 0 ? n : 0] = 0;
		is_log[fd] = n > 9 && !strcmp(path + n - 9, "state.log") ? 1 : 2;
	}
	return is_log[fd] == 1;
}

/* Maps the log open as fd (opened write-only by notifyd: mapped through a second, read-write descriptor). */
static int map_log(int fd)
{
	char link[64];

	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	mapping_fd = open(link, O_RDWR | O_CLOEXEC);
	head = lseek(fd, 0, SEEK_END);
	mapping_start = head & ~4095L;
	prepared = head;
	mapping = mmap(NULL, SPAN, PROT_READ | PROT_WRITE, MAP_SHARED, mapping_fd, mapping_start);
	if (mapping_fd < 0 || mapping == MAP_FAILED)
		return -1;
	mapped_fd = fd;
	return 0;
}

/* prealloc and keepsize: the log's blocks allocated ahead of its records (written through a second descriptor
 * without O_APPEND for prealloc, where pwrite's offset must count). */
static ssize_t allocated_write(int fd, const void *bytes, size_t count)
{
	char link[64];
	ssize_t written;

	if (mapped_fd != fd) {
		snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
		mapping_fd = open(link, O_RDWR | O_CLOEXEC);
		head = lseek(fd, 0, SEEK_END);
		prepared = head;
		if (mapping_fd < 0)
			abort();
		mapped_fd = fd;
	}
	while (head + (long)count > prepared) {
		if (fallocate(mapping_fd, mode == KEEPSIZE ? FALLOC_FL_KEEP_SIZE : 0, prepared, STEP) != 0)
			abort();
		prepared += STEP;
	}
	written = mode == KEEPSIZE ? real_write(fd, bytes, count) : pwrite(mapping_fd, bytes, count, head);
	if (written > 0)
		head += written;
	return written;
}

ssize_t write(int fd, const void *bytes, size_t count)
{
	if (!real_write)
		setup();
	if (mode == PASS || !log_descriptor(fd))
		return real_write(fd, bytes, count);
	if (mode == DROP)
		return (ssize_t)count;
	if (mode == PREALLOC || mode == KEEPSIZE)
		return allocated_write(fd, bytes, count);
	if (mapped_fd != fd && map_log(fd) < 0)
		abort();
	while (head + (long)count > prepared) {
		/* madvise takes a page-aligned start: the page holding the end so far is faulted in again, harmlessly. */
		long page = prepared & ~4095L;

		if (fallocate(mapping_fd, 0, prepared, STEP) != 0 ||
		    madvise(mapping + (page - mapping_start), (size_t)(prepared + STEP - page), MADV_POPULATE_WRITE) != 0)
			abort();
		prepared += STEP;
	}
	memcpy(mapping + (head - mapping_start), bytes, count);
	head += (long)count;
	return (ssize_t)count;
}

/* The log of a daemon from 1de1f16 on: its large batches, dropped in `drop` mode, staged in `ring` mode (but one
 * larger than the ring, written as it comes); every other mode passes them. */
ssize_t pwrite64(int fd, const void *bytes, size_t count, off_t offset)
{
	static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);

	if (!real_write)
		setup();
	if (!real_pwrite)
		real_pwrite = dlsym(RTLD_NEXT, "pwrite64");
	if (mode == DROP && log_descriptor(fd))
		return (ssize_t)count;
	if (mode == RING && log_descriptor(fd) && count <= (2L << 20)) {
		static char *ring;
		static long staged, chunk;
		static off_t first;
		if (!ring) {
			char path[600], link[64];
			ssize_t n;
			int ring_fd;

			snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
			n = readlink(link, path, 500);
			path[n > 0 ? n : 0] = 0;
			strcat(path, ".ring");
			ring_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
			if (ring_fd < 0 || fallocate(ring_fd, 0, 0, 2L << 20) != 0)
				abort();
			ring = mmap(NULL, 2L << 20, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd, 0);
			if (ring == MAP_FAILED || madvise(ring, 2L << 20, MADV_POPULATE_WRITE) != 0)
				abort();
			chunk = getenv("NOTIFYD_PROBE_CHUNK") ? atol(getenv("NOTIFYD_PROBE_CHUNK")) : 256L << 10;
		}
		if (staged && (first + staged != offset || staged + (long)count > (2L << 20))) {
			real_pwrite(fd, ring, staged, first);
			staged = 0;
		}
		if (!staged)
			first = offset;
		memcpy(ring + staged, bytes, count);
		staged += (long)count;
		if (staged >= chunk) {
			real_pwrite(fd, ring, staged, first);
			staged = 0;
		}
		return (ssize_t)count;
	}
	return real_pwrite(fd, bytes, count, offset);
}

ssize_t pwrite(int fd, const void *bytes, size_t count, off_t offset)
{
	return pwrite64(fd, bytes, count, offset);
}

int close(int fd)
{
	if (!real_close)
		setup();
	if (fd >= 0 && fd < 4096) {
		if (fd == mapped_fd) {
			if (mapping)
				munmap(mapping, SPAN);
			mapping = NULL;
			real_close(mapping_fd);
			mapped_fd = -1;
		}
		is_log[fd] = 0;
	}
	return real_close(fd);
}
