module github.com/reinhq/rein

go 1.26.0

require (
	github.com/aymanbagabas/go-udiff v0.4.2 // indirect
	github.com/bmatcuk/doublestar/v4 v4.10.4 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	mvdan.cc/sh/v3 v3.14.1 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
