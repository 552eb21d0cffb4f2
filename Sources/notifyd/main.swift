print("notifyd: not built yet")
