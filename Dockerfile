# syntax=docker/dockerfile:1
# One image for every paylab process: the orders API and relay, the ledger,
# the notifications consumer and the paylab CLI. Static binaries on a
# distroless, non-root runtime.
FROM golang:1.26 AS build
# go.mod's toolchain line names the patch release to build with; the go
# command fetches it from the module proxy when the image's Go is older.
ENV GOTOOLCHAIN=auto
# The build uses paylab's go.mod alone, not the development workspace
# (go.work): its replace directives point at the library modules in
# pkg/outbox and pkg/inbox, whose go.mod files the download needs too.
ENV GOWORK=off
WORKDIR /src
COPY go.mod go.sum ./
COPY pkg/outbox/go.mod pkg/outbox/go.sum ./pkg/outbox/
COPY pkg/inbox/go.mod pkg/inbox/go.sum ./pkg/inbox/
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ \
      ./cmd/paylab ./services/orders ./services/ledger ./services/notifications

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER nonroot:nonroot
EXPOSE 8080 8082 9080 9081 9082 9083
ENTRYPOINT []
