package group

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// Requests arriving during a commit share the next one; when a commit
// fails, its callers get the error and those queued behind it the wrapped
// one, and failed runs once.
func TestGroupsAndFailure(t *testing.T) {
	var mu sync.Mutex
	var q Queue[int]
	started := make(chan struct{})
	release := make(chan struct{})
	var groups [][]int
	boom := errors.New("boom")
	commit := func(g []int) error {
		groups = append(groups, g)
		if len(groups) == 1 {
			close(started)
			<-release
			return boom
		}
		return nil
	}
	failures := 0
	failed := func(error) { failures++ }
	behind := func(err error) error { return fmt.Errorf("behind: %w", err) }

	errs := make([]error, 4)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		mu.Lock()
		errs[0] = q.Do(&mu, 0, commit, failed, behind)
	}()
	<-started
	for i := 1; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			errs[i] = q.Do(&mu, i, commit, failed, behind)
		}()
	}
	// Wait until the three are queued behind the running commit.
	for {
		mu.Lock()
		n := len(q.pending)
		mu.Unlock()
		if n == 3 {
			break
		}
	}
	close(release)
	wg.Wait()
	if !errors.Is(errs[0], boom) || errs[0].Error() != "boom" {
		t.Errorf("the failed group's caller: %v", errs[0])
	}
	for i := 1; i < 4; i++ {
		if !errors.Is(errs[i], boom) || errs[i].Error() != "behind: boom" {
			t.Errorf("caller %d queued behind: %v", i, errs[i])
		}
	}
	if failures != 1 || len(groups) != 1 {
		t.Errorf("failed ran %d times, %d commits", failures, len(groups))
	}
	// The queue works again, and groups.
	mu.Lock()
	if err := q.Do(&mu, 9, commit, failed, behind); err != nil || q.Busy() {
		t.Errorf("after the failure: %v, busy %v", err, q.Busy())
	}
}
