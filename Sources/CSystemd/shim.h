// libsystemd, for notifyd only: readiness and status (sd-daemon), socket activation (sd-daemon), the journal
// (sd-journal) and the publisher's unit (sd-login). The NotifyBus library never links it.
#pragma once
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-login.h>
#include <sys/uio.h>
