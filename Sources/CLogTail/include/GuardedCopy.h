// A copy into a shared file mapping that survives the file system failing it (the state log's tail, LogTail.swift).
//
// A store into a page of a file mapping that the file system cannot back (an I/O error reading it back, the file
// cut short by another process) raises SIGBUS, which kills the process. The state log's tail is written through
// such a mapping (issue 51), where `write` would return an error instead: this copy turns the SIGBUS back into one.
#ifndef NOTIFYD_GUARDED_COPY_H
#define NOTIFYD_GUARDED_COPY_H

#include <stddef.h>

/// Installs the SIGBUS handler guarded copies need, once for the process; later calls do nothing. A SIGBUS raised
/// outside a guarded copy goes on to the handler that was installed before (the Swift runtime's backtracer, or
/// the default action, which ends the process as it would have without this one).
/// Returns 0, or -1 with errno set when the handler could not be installed.
int notifyd_guarded_copy_install(void);

/// Copies `count` bytes from `source` to `destination`, an address in a shared file mapping, and returns 0; or
/// returns -1 when a store raised SIGBUS: the bytes before the failing page may have been copied, none after it.
/// Install the handler first.
int notifyd_guarded_copy(void *destination, const void *source, size_t count);

#endif
