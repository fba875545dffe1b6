package bench

import (
	"os"
	"testing"

	"github.com/reinhq/rein/store/postgres/pgtest"
)

// TestMain runs the test binary as one of the benchmarks' helper processes
// when its environment says so: the model server (model_test.go), the
// spawner that measures a command's peak memory (cli_test.go), a lease
// holder (postgres_test.go). Otherwise it runs the benchmarks, with a
// PostgreSQL server when one can start (pgtest).
func TestMain(m *testing.M) {
	switch {
	case os.Getenv(modelEnv) != "":
		serveModel()
	case os.Getenv(spawnEnv) != "":
		os.Exit(spawn(os.Getenv(spawnEnv)))
	case os.Getenv(holderEnv) != "":
		holdLease(os.Getenv(holderEnv))
	default:
		pgtest.Main(m)
	}
}
