// Package apply writes the objects the controller makes: server-side apply
// under peerlink's field manager, taking over the fields it sets, and never
// over an object of the same name that another party made (the reconcile
// stalls with ReasonForeignObject instead). It decides nothing about what
// an object holds; the reconcilers build them.
package apply
