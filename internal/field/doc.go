// Package field names what is wrong in a set of options by the option's
// field, so that a library's errors need not know the flags a command
// gives its options: the command maps fields to flags with WithFlags.
package field
