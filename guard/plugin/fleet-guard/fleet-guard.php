<?php
/**
 * Plugin Name:       Fleet Guard
 * Description:       Stands outside a plugin that kills the site: a must-use loader that answers only requests signed by your fleet (Ed25519): run a page with chosen plugins left out, pause a plugin, and put back a version kept before each update.
 * Version:           1.0.0
 * Requires PHP:      7.4
 * Requires at least: 5.5
 * Author:            fleet-maintenance
 * License:           GPL-2.0-or-later
 * License URI:       https://www.gnu.org/licenses/gpl-2.0.html
 * Text Domain:       fleet-guard
 *
 * This file is the ordinary plugin: it places the must-use loader on activation (which loads the guard before any
 * other plugin on every request) and removes it on deactivation. Where the loader could not be placed, the guard
 * still runs from here, late, and says so in its status and in wp-admin.
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

require_once __DIR__ . '/guard.php';

register_activation_hook( __FILE__, array( 'Fleet_Guard_Setup', 'activate' ) );
register_deactivation_hook( __FILE__, array( 'Fleet_Guard_Setup', 'deactivate' ) );

if ( ! defined( 'FLEET_GUARD_LOADED' ) ) {
	// The loader is missing (not placed, or removed): the guard answers its status from here, and keeps versions.
	Fleet_Guard::boot( Fleet_Guard_Setup::data_dir(), Fleet_Guard::MODE_PLUGIN );
}

add_action( 'admin_notices', array( 'Fleet_Guard_Setup', 'admin_notice' ) );
