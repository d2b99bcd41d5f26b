package echoapi

// Reply is what `echo serve` answers to every HTTP request.
type Reply struct {
	// Pod is the host name of the serving pod.
	Pod string `json:"pod"`
	// PodIP is the serving pod's own address.
	PodIP string `json:"podIP"`
	// Client is the caller's address as the server sees it, after any NAT
	// on the way.
	Client string `json:"client"`
}

// Got is what `echo get` prints.
type Got struct {
	URL string `json:"url"`
	// From is the local address the request left from.
	From  string `json:"from"`
	Reply Reply  `json:"reply"`
}

// Measured is what `echo stream` and `echo rr` print.
type Measured struct {
	Seconds float64 `json:"seconds"`
	// Bytes is the payload sent (stream) or exchanged both ways (rr).
	Bytes int64 `json:"bytes"`
	// BitsPerSecond is the payload throughput.
	BitsPerSecond float64 `json:"bitsPerSecond"`
	// Exchanges is the number of request/response round trips (rr only).
	Exchanges int64 `json:"exchanges,omitempty"`
	// PerSecond is Exchanges per second (rr only).
	PerSecond float64 `json:"perSecond,omitempty"`
}

// Probe is one line `echo probe` prints per request it sends.
type Probe struct {
	// UnixMilli is when the request was sent.
	UnixMilli int64 `json:"t"`
	// OK is true when an answer came back in time.
	OK bool `json:"ok"`
	// Millis is how long the request took, to its answer or its error.
	Millis int64 `json:"ms"`
	// Reply is the answer, when OK.
	Reply *Reply `json:"reply,omitempty"`
	// Error says why there was no answer.
	Error string `json:"error,omitempty"`
}
