// Package scripts is the Go side of RMQ's Lua scripts: it builds each
// script of package luascripts into the text Redis runs, calls them, and
// reads and writes the formats they store.
//
// The Lua files (luascripts/*.lua) are the only code that writes more than
// one key. Every key comes through KEYS, each file's header names its KEYS,
// ARGV and reply, and the keys of one topic slot share one hash tag. A
// call touches one topic slot, except that sendbatch, fetch and ack take
// several slots' key groups in one call on a single node, where no hash
// slot rule applies (on a cluster every call carries one group).
//
// Redis scripts cannot call each other, so a script is built as the
// definitions of lib.lua, flowlib.lua and grouplib.lua that it uses,
// followed by its own file; Load loads them all (on every master of a
// cluster) so that pipelined EVALSHA calls find them.
//
// What this package holds:
//
//   - the scripts, as *redis.Script values (Send1, SendBatch, Fetch, Ack,
//     Rollback, Sweep, Extend, Remove, Confirm, Release, Requeue,
//     DeleteDead, Schedule, ScheduleReg, GSend, GRemove, Permit, Takeover);
//   - the argument builders and reply parsers of the calls with many parts
//     (FetchCall and MultiFetchArgs, ConfirmArgs, ReleaseArgs, GSendArgs,
//     PermitCall), and RunAll, which pipelines calls;
//   - the envelope a slot's msg and deadmsg hashes hold (Envelope,
//     EncodeEnvelope, DecodeEnvelope; lib.lua's header comment is the
//     reference for its layout), with its options and headers;
//   - the delivery token of a prepare score (SplitPrepareScore, TokenMod,
//     HeldToken and IsHeld for deliveries held ahead of their instant);
//   - the errors scripts answer with (IsFenced for a stale owner epoch in
//     ZooKeeper mode, IsNoScript).
//
// The tests of this package pin the invariants of the data model against a
// real redis-server: model_test.go compares a slot with a model after every
// step of random sends, fetches, acks, rollbacks, sweeps and removes.
package scripts
