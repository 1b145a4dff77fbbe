package deploycheck

// root is the repository's root, seen from this package.
const root = "../../.."
