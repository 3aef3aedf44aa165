// Package rie runs Lambda bootstrap binaries under the AWS Lambda Runtime
// Interface Emulator (installed by make setup), for the integration tests and the
// local event source mapping driver. The emulator takes one invoke at a
// time — a second concurrent one crashes it — so an Emulator serialises its
// invokes, and each function gets an emulator of its own.
package rie
