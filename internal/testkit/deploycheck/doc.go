// Package deploycheck keeps the files that cannot run here honest: the k6
// scripts and the docker compose file are checked against the code by its
// tests.
package deploycheck
