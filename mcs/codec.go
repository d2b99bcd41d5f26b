package mcs

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxDocumentBytes bounds an export set once decompressed.
const MaxDocumentBytes = 64 << 20

// document is an export set as it is stored and sent: versioned.
type document struct {
	Version  int       `json:"version"`
	Services []Service `json:"services"`
}

// Version is the version of the document and of the exchange protocol.
const Version = 1

// Encode compresses the set into its stored form.
func Encode(s Set) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(document{Version: Version, Services: s.Sorted()}); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Rejected is a service of a received set that was not accepted, and why.
type Rejected struct {
	Key    Key
	Reason string
}

// ErrTooLarge says a document or a set exceeds its bound.
var ErrTooLarge = errors.New("too large")

// Decode reads a stored set, bounded by MaxDocumentBytes and l: a service
// that fails Validate or repeats another is rejected (and reported), the
// others kept; more services than l.Services is an error, and nothing is
// kept.
func Decode(data []byte, l Limits) (Set, []Rejected, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("export set: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxDocumentBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("export set: %w", err)
	}
	if len(raw) > MaxDocumentBytes {
		return nil, nil, fmt.Errorf("export set: more than %d bytes: %w", MaxDocumentBytes, ErrTooLarge)
	}
	var doc document
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("export set: %w", err)
	}
	if doc.Version != Version {
		return nil, nil, fmt.Errorf("export set: version %d, this side reads %d", doc.Version, Version)
	}
	return Accept(doc.Services, l)
}

// Accept validates received services into a set; see Decode.
func Accept(services []Service, l Limits) (Set, []Rejected, error) {
	if len(services) > l.Services {
		return nil, nil, fmt.Errorf("export set: %d services, at most %d: %w", len(services), l.Services, ErrTooLarge)
	}
	set := make(Set, len(services))
	var rejected []Rejected
	for i := range services {
		s := services[i]
		s.Normalize()
		if err := s.Validate(l); err != nil {
			rejected = append(rejected, Rejected{Key: s.Key, Reason: err.Error()})
			continue
		}
		if _, dup := set[s.Key]; dup {
			rejected = append(rejected, Rejected{Key: s.Key, Reason: "exported twice"})
			continue
		}
		set[s.Key] = s
	}
	return set, rejected, nil
}
