package main

import (
	"strings"
	"testing"
)

func TestSelectTables(t *testing.T) {
	all := tables()
	got, err := selectTables(all, "")
	if err != nil || len(got) != len(all) {
		t.Fatalf("no -only: %d tables, %v; want all %d", len(got), err, len(all))
	}
	got, err = selectTables(all, "lab, dataplane")
	if err != nil || len(got) != 2 || got[0].name != "lab" || got[1].name != "dataplane" {
		t.Fatalf("-only lab,dataplane: %+v, %v", got, err)
	}
	if _, err := selectTables(all, "dataplane,throughput"); err == nil || !strings.Contains(err.Error(), `no table "throughput"`) {
		t.Fatalf("-only with an unknown name: %v", err)
	}
}
