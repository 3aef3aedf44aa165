// Package jsonscan reads JSON objects and arrays member by member, in one
// pass and without allocating, for the decoders on the invalidation hot path.
//
// It validates exactly what encoding/json validates (json.Valid) and decodes
// strings exactly as encoding/json does, invalid UTF-8 and lone surrogates
// included; the fuzz tests hold it to that. MemberElements alone leaves what
// is inside the elements it finds for their decoders to validate.
// encoding/json costs about ten times more on an SNS envelope, whose long
// signature must be skipped.
package jsonscan
