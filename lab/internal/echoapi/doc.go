// Package echoapi holds what the lab's echo program prints and answers, as
// JSON, so that the program and the code reading its output agree on one
// definition. It holds no behaviour.
package echoapi
