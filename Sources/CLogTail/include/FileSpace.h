// Allocating a file's blocks ahead of its writes: `fallocate`, which Glibc declares under _GNU_SOURCE only.
#ifndef NOTIFYD_FILE_SPACE_H
#define NOTIFYD_FILE_SPACE_H

#include <sys/types.h>

/// Allocates the blocks of `length` bytes of `descriptor`'s file from `offset`, extending the file when they reach
/// past its end (`fallocate` with no flags: what was written stays, what was not reads as zeros). Returns 0, or -1
/// with errno set (ENOSPC, EOPNOTSUPP where the file system cannot).
int notifyd_allocate(int descriptor, off_t offset, off_t length);

#endif
