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
// with every action — payments, a verification, a toggle, a kill, the mode
// switch — and the console asks the processes' admin listeners whether
// they take it (a toggle or a kill is then forwarded to its process, which
// checks again): without the right token nothing is done. A deployment
// without chaos controls takes no action. Reading the state needs no
// token. The page never sees a token it was not given, nor a database URL
// or an admin address.
//
// It answers only the Host names on its allow-list (AllowHosts: the
// loopback names on its port, and those configured), so that a site whose
// name is made to resolve to the console's address cannot read or drive it
// from its users' browsers (DNS rebinding).
//
// It runs on one of two deployments (Deployment): Local, the services as
// supervised children of the console on servers it was given (paylab
// console starts private ones), whose orders API it can restart in another
// mode; or Compose, a running docker compose deployment reached over its
// admin APIs, whose mode is fixed by its .env.
package console
