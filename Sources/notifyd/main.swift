// The daemon is the NotifyDaemon library; this is its executable.
import NotifyDaemon

DaemonEntry.run()
