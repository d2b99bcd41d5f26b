// Package httpjson gets one JSON document over HTTP, read up to a bound:
// the answers of echo and probe servers, which may stand in another cluster.
package httpjson
