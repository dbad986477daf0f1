<?php
/**
 * Fleet Guard's must-use loader (placed here by the Fleet Guard plugin on activation; removed on deactivation).
 * Must-use plugins load before every plugin, so the guard answers even when a plugin fatals at load.
 * If the Fleet Guard plugin's folder is gone, this file does nothing.
 */
if ( ! defined( 'ABSPATH' ) ) {
	exit;
}
$fleet_guard_core = '%CORE%';
if ( is_readable( $fleet_guard_core ) ) {
	require_once $fleet_guard_core;
	define( 'FLEET_GUARD_LOADED', true );
	Fleet_Guard::boot( '%DATA%', Fleet_Guard::MODE_MUST_USE );
}
unset( $fleet_guard_core );
