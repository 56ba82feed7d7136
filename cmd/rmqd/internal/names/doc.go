// Package names holds lmstfy's name rules for namespaces, queues and
// pools, and how rmqd maps them onto the library's topic names.
package names
