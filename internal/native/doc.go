// Package native tells whether a cache runs a compare-and-set as a command
// of its own (Valkey 9's DELIFEQ, 8.1's SET … IFEQ), which a caller then
// sends instead of the Lua script that does the same: one command where
// EVALSHA runs a script, and no +evalsha in the user's ACL for it. The
// scripts stay for older engines, and for a node that refuses the command
// (an engine being upgraded, node by node).
package native
