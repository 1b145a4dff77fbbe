// Package console is paylab's web console: one page that shows payments
// cross the dual-write hole — from the orders table through the outbox, the
// relays and Kafka into the ledger and the mailbox — with a counter at every
// stage, and that breaks the flow on purpose: the fault points of every
// process as toggles, a kill per process, the outbox/naive switch, payments
// placed at a rate, and the reconciliation that counts what was lost.
//
// The relays' stage follows their mode (Settings.RelayMode): polling relays
// show the leases they hold; WAL relays show which one reads the
// replication slot and which stand by, the reader lease, and the slot's
// position and retained WAL, and are offered only the fault points a WAL
// relay reaches (PointsIn).
//
// The console holds no chaos token. The page sends the one its user typed
// with every toggle, and the console forwards it to the process's admin
// listener, which alone decides: without the right token the toggle is
// refused there. The page never sees a token it was not given, nor a
// database URL or an admin address.
//
// It runs on one of two deployments (Deployment): Local, the services as
// supervised children of the console on servers it was given (paylab
// console starts private ones), whose orders API it can restart in another
// mode; or Compose, a running docker compose deployment reached over its
// admin APIs, whose mode is fixed by its .env.
package console
