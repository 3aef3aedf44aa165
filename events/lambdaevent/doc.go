// Package lambdaevent holds the shapes of the Lambda events the functions take,
// as Lambda delivers them, for what builds payloads: the local event source
// mapping, the tests and the benchmarks. The functions themselves read
// payloads with package events' decoders, not with these.
package lambdaevent
