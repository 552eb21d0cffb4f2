// A service writes `import NotifyBus` and has the protocol's names too (Topic, TopicPattern, Delivery, …): they
// live in NotifyProtocol, which the daemon shares, and are re-exported here.
@_exported public import NotifyProtocol
