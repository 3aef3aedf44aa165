// Package lock is a lease lock on one key: TryLock takes it with SET NX PX
// and a random token, and Release and Extend act only while the key still
// holds that token (compare-and-delete, compare-and-pexpire: DELIFEQ and
// SET … IFEQ on Valkey 9, one Lua script each on older engines), so an owner whose lease expired never releases or extends the
// next owner's. It is a lease, not a fence: work under it must finish
// within its TTL, or extend it in time, and a process paused past the TTL
// may find, too late, that someone else held it meanwhile (ErrLockLost).
package lock
