// Preloaded into every Node process started by tests/peers/conformance.sh (NODE_OPTIONS=--require):
// server-everything and supergateway call app.listen(PORT) with no host, which binds all
// interfaces. This forces every TCP listen onto 127.0.0.1. Unix-socket listens are untouched.
"use strict";
const net = require("net");
const LOOPBACK = "127.0.0.1";
const origListen = net.Server.prototype.listen;
function isPort(v) {
  return typeof v === "number" || (typeof v === "string" && /^\d+$/.test(v));
}
net.Server.prototype.listen = function (...args) {
  const a0 = args[0];
  if (a0 !== null && typeof a0 === "object" && !Array.isArray(a0) && !(a0 instanceof net.Server)) {
    if (a0.path === undefined && a0.fd === undefined && a0.handle === undefined && a0._handle === undefined) {
      args[0] = Object.assign({}, a0, { host: LOOPBACK });
    }
  } else if (isPort(a0) || a0 === undefined || typeof a0 === "function") {
    if (a0 === undefined || typeof a0 === "function") args.unshift(0);
    if (typeof args[1] === "string") args[1] = LOOPBACK;
    else args.splice(1, 0, LOOPBACK);
  }
  return origListen.apply(this, args);
};
