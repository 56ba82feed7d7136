//go:build race

package dashboard_test

const raceEnabled = true
