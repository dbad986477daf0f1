<?php
/**
 * The fleet's Ed25519 public keys (base64, 32 bytes each) this guard accepts. `fleet guard build` writes this file
 * into the zip it builds; the repository's copy accepts no key, so an unbuilt guard answers nothing.
 */
if ( ! defined( 'ABSPATH' ) ) {
	exit;
}
return array();
