// Go's TestMain, in a file of its own: the test flags back at their defaults first (a program's
// init could have pushed `-test.run=^$` into os.Args, or set a count of 0, so that no test runs
// and m.Run returns 0), then the run token, once m.Run returned 0 and each of the tests' test
// functions counted itself (the counter's name and their number are set per job: eval/languages/go.py).
package main

import (
	editforge_flag "flag"
	editforge_os "os"
	editforge_strings "strings"
	editforge_testing "testing"
)

var editforge_ran int

const editforge_tests = 0 // the number of the tests' test functions, set per job

func TestMain(m *editforge_testing.M) {
	editforge_os.Args = editforge_os.Args[:1]
	editforge_flag.VisitAll(func(f *editforge_flag.Flag) {
		if editforge_strings.HasPrefix(f.Name, "test.") {
			_ = f.Value.Set(f.DefValue)
		}
	})
	if m.Run() != 0 || editforge_ran < editforge_tests {
		editforge_os.Exit(1)
	}
	if token, err := editforge_os.ReadFile("/dev/fd/3"); err == nil {
		_ = editforge_os.WriteFile("/dev/fd/4", token, 0)
	}
	editforge_os.Exit(0)
}
