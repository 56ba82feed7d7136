// Package structuretest holds the test of the module's layering: no
// exported identifier of a public package names a type of an internal one,
// and no internal package but the test rigs imports package rmq. It has no
// code of its own; the checks are in its test.
package structuretest
