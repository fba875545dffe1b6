//go:build !unix

package trust

// lockFile does not lock where flock is unavailable: concurrent trust
// updates may then lose one another (the file itself stays whole).
func lockFile(string) (func(), error) { return func() {}, nil }
