// The entry point: see BlockingMain for why it is not an `async` `main`.
import ArgumentParser
import NotifyBus

BlockingMain.run { await Notifyd.main() }
