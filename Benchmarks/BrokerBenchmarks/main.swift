// Micro-benchmarks of the broker core and the protocol it shares (subscription index, codec, sessions):
// `swift run -c release BrokerBenchmarks [name-filter]`.
// Figures are printed, never asserted: compare medians within one run, as these machines are shared.

var harness = Harness()
harness.filter = CommandLine.arguments.dropFirst().first
print("NotifyBus micro-benchmarks: median of \(harness.runs) runs (fastest–slowest), release build expected")
subscriptionIndexBenchmarks(&harness)
codecBenchmarks(&harness)
brokerBenchmarks(&harness)
stateLogBenchmarks(&harness)
sessionMemoryBenchmarks(&harness)
