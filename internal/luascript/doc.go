// Package luascript runs Lua scripts by SHA1 (EVALSHA), loading them with
// EVAL when the server does not know them yet, through the small client
// interface the library packages depend on rather than a whole
// valkey.Client. Every key a script touches must be passed in keys, and
// keys that go together must share a hash tag: a script runs on one node.
package luascript
