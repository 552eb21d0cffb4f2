print("notify: not built yet")
