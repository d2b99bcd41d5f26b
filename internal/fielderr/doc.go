// Package fielderr is the error of a setting that cannot work, named by its
// field (InfoFile, ClientPort), and the rewriting of such errors to the
// names a command gives the fields, its flags. Library packages name
// fields; only commands know flags. It does not check values: the packages
// that own the settings do.
package fielderr
