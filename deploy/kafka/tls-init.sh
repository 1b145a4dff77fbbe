#!/usr/bin/env bash
# compose.cluster.yml's one-shot kafka-tls: the Kafka cluster's CA and the
# nodes' certificate, generated at the first start into the volume mounted
# at $TLS_DIR (nothing of it is in the repository). Runs as root in the
# Kafka image (keytool, from its JRE) and gives the files to the brokers'
# user. Afterwards it changes nothing: `docker compose down -v` (which
# deletes the volume) makes new ones.
#
#   ca.crt             the CA's certificate (PEM, world-readable): clients
#                      check the brokers against it (KAFKA_CA_FILE)
#   node.p12           the nodes' key and certificate (PKCS12, CN=paylab-kafka-node,
#                      for kafka, kafka-2, kafka-3, localhost and 127.0.0.1),
#                      readable by the brokers' user only
#   keystore-password  node.p12's password, readable by the brokers' user only
#
# The CA's private key is deleted once it has signed: nothing else can be
# signed by it.
set -euo pipefail
dir=${TLS_DIR:-/kafka-tls}
if [ -s "$dir/node.p12" ] && [ -s "$dir/ca.crt" ] && [ -s "$dir/keystore-password" ]; then
  echo "kafka-tls: the CA and the nodes' certificate exist in $dir"
  exit 0
fi
owner=$(id -u appuser 2>/dev/null || echo 1000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rand() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
capw=$(rand) kspw=$(rand)
days=825
kt() { keytool "$@" >"$work/keytool.log" 2>&1 || { cat "$work/keytool.log" >&2; return 1; }; }

kt -genkeypair -alias ca -keyalg RSA -keysize 2048 -validity "$days" -dname "CN=paylab compose Kafka CA" \
  -ext bc:c -ext KU=keyCertSign,cRLSign -storetype PKCS12 -keystore "$work/ca.p12" -storepass "$capw"
kt -exportcert -rfc -alias ca -keystore "$work/ca.p12" -storepass "$capw" -file "$work/ca.crt"
kt -genkeypair -alias node -keyalg RSA -keysize 2048 -validity "$days" -dname "CN=paylab-kafka-node" \
  -storetype PKCS12 -keystore "$work/node.p12" -storepass "$kspw"
kt -certreq -alias node -keystore "$work/node.p12" -storepass "$kspw" -file "$work/node.csr"
kt -gencert -alias ca -keystore "$work/ca.p12" -storepass "$capw" -infile "$work/node.csr" -outfile "$work/node.crt" \
  -rfc -validity "$days" -ext "SAN=DNS:kafka,DNS:kafka-2,DNS:kafka-3,DNS:localhost,IP:127.0.0.1" \
  -ext EKU=serverAuth,clientAuth -ext KU=digitalSignature,keyEncipherment
kt -importcert -noprompt -alias ca -file "$work/ca.crt" -keystore "$work/node.p12" -storepass "$kspw"
kt -importcert -noprompt -alias node -file "$work/node.crt" -keystore "$work/node.p12" -storepass "$kspw"

mkdir -p "$dir"
install -m 644 "$work/ca.crt" "$dir/ca.crt"
install -m 600 -o "$owner" "$work/node.p12" "$dir/node.p12"
printf '%s' "$kspw" >"$work/keystore-password"
# last: its presence says the others are complete
install -m 600 -o "$owner" "$work/keystore-password" "$dir/keystore-password"
echo "kafka-tls: generated a CA and the nodes' certificate in $dir (the CA's key is not kept):"
keytool -printcert -file "$dir/ca.crt" | sed -n 's/^\(Owner\|Valid\)/  &/p'
