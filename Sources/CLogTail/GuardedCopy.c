#define _GNU_SOURCE
#include "GuardedCopy.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>

// Where the guarded copy running on this thread returns to when a store faults; null outside one. Initial-exec
// TLS: read in a signal handler, it must not allocate.
static __thread sigjmp_buf *volatile active __attribute__((tls_model("initial-exec")));
static struct sigaction previous;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int installed = -1, install_error;

static void on_bus_error(int signal, siginfo_t *info, void *context)
{
	sigjmp_buf *copy = active;

	if (copy) {
		active = NULL;
		siglongjmp(*copy, 1);
	}
	if (previous.sa_flags & SA_SIGINFO) {
		previous.sa_sigaction(signal, info, context);
		return;
	}
	if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
		previous.sa_handler(signal);
		return;
	}
	// The default action (an ignored SIGBUS from a fault is the default too): restored, and the signal raised
	// again, so the process ends with SIGBUS as it would have.
	struct sigaction fallback = { .sa_handler = SIG_DFL };
	sigemptyset(&fallback.sa_mask);
	sigaction(SIGBUS, &fallback, NULL);
	raise(SIGBUS);
}

static void install(void)
{
	struct sigaction action = { .sa_sigaction = on_bus_error, .sa_flags = SA_SIGINFO | SA_ONSTACK };

	sigemptyset(&action.sa_mask);
	installed = sigaction(SIGBUS, &action, &previous);
	install_error = errno;
}

int notifyd_guarded_copy_install(void)
{
	pthread_once(&once, install);
	if (installed != 0)
		errno = install_error;
	return installed;
}

int notifyd_guarded_copy(void *destination, const void *source, size_t count)
{
	sigjmp_buf here;

	// No signal mask saved (that would be a system call per copy): the failure path unblocks SIGBUS, which the
	// handler's frame had blocked, itself.
	if (sigsetjmp(here, 0)) {
		sigset_t bus;

		sigemptyset(&bus);
		sigaddset(&bus, SIGBUS);
		pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
		return -1;
	}
	active = &here;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	memcpy(destination, source, count);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	active = NULL;
	return 0;
}
