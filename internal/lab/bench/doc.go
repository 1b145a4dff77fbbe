// Package bench is `paylab bench` (make bench): it measures each stage of
// paylab against a raw baseline on the same stack, in one run, and reports
// ratios, which travel between machines better than absolute figures.
//
//	B1 raw capture   the capture's SQL (rawcapture.go) from a plain pgx pool
//	S1 HTTP capture  POST /v1/payments through the orders binary; S1/B1 ≥ 0.85 at concurrency 8 and 32
//	B2 raw produce   a sarama producer with the relay's settings and messages
//	S2 relay drain   a 100 000-event backlog drained by 1 and by 3 relays; S2/B2 ≥ 0.5,
//	                 3 relays no slower than 1, ≤ 2 statements per batch
//	B3 raw consume   a consumer group reading the S2 topic
//	S3 consumer      the ledger binary through its inbox on the same topic; S3/B3 ≥ 0.5
//	S4 end to end    commit → ledger applied at 25 % and 50 % of S1's best rate: p99
//	                 ≤ 50 ms and ≤ 150 ms with LISTEN/NOTIFY, ≤ poll interval + 50 ms
//	                 polling only
//	S5 growth        S2 and S4 again over 5 000 000 rows of outbox and inbox history,
//	                 S4 alternated with runs on fresh databases; history costs ≤ 10 %
//
// The services run as child processes of the built binaries, configured by
// environment as they are deployed; the relays run in this process (with the
// relay's producer settings and default configuration) so a pgx tracer can
// count their statements (polling-only mode sets outbox.RelayConfig.PollOnly). A run creates a role, databases and topics named after itself
// and removes them at the end; C1, S4, S5 and P1 start after the earlier
// stages' databases are dropped, so that autovacuum does not clean those on
// the cores they measure. Targets are reported as pass or miss; a miss
// never fails the run, a stage that cannot measure does.
package bench
