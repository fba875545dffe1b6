package tool

import (
	"context"
	"slices"
	"testing"

	"github.com/reinhq/rein/llm"
)

func named(name, desc string) Tool {
	return &Func{ToolSpec: llm.ToolSpec{Name: name, Description: desc}, Body: func(context.Context, Call) (Result, error) { return TextResult(desc), nil }}
}

func TestRegistrySync(t *testing.T) {
	r, err := NewRegistry(named("read", ""), named("x__a", "old a"), named("bash", ""), named("x__b", ""))
	if err != nil {
		t.Fatal(err)
	}
	// b goes, a is replaced in place, c is appended; read and bash stay.
	if err := r.Sync("x__", []Tool{named("x__c", ""), named("x__a", "new a")}); err != nil {
		t.Fatal(err)
	}
	if got, want := r.Names(), []string{"read", "x__a", "bash", "x__c"}; !slices.Equal(got, want) {
		t.Fatalf("names %v, want %v", got, want)
	}
	if a, _ := r.Lookup("x__a"); a.Spec().Description != "new a" {
		t.Fatalf("x__a not replaced: %q", a.Spec().Description)
	}
	if _, ok := r.Lookup("x__b"); ok {
		t.Fatal("x__b still registered")
	}
	if c, ok := r.Lookup("x__c"); !ok || c.Spec().Name != "x__c" {
		t.Fatal("x__c not found by Lookup")
	}
	// Bad input changes nothing.
	for _, bad := range [][]Tool{{named("read", "")}, {named("x__d", ""), named("x__d", "")}} {
		if err := r.Sync("x__", bad); err == nil {
			t.Fatalf("Sync(%v) accepted", bad)
		}
	}
	if got := r.Names(); !slices.Equal(got, []string{"read", "x__a", "bash", "x__c"}) {
		t.Fatalf("a refused Sync changed the registry: %v", got)
	}
	if err := r.Sync("x__", nil); err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); !slices.Equal(got, []string{"read", "bash"}) {
		t.Fatalf("empty sync left %v", got)
	}
}
