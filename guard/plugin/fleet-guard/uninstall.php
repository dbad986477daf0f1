<?php
/** Deleting the plugin removes the loader and every version the guard kept. */
if ( ! defined( 'WP_UNINSTALL_PLUGIN' ) ) {
	exit;
}
require_once __DIR__ . '/guard.php';
Fleet_Guard_Setup::remove_loader();
Fleet_Guard_Keep::remove_tree( Fleet_Guard_Setup::data_dir() );
delete_option( 'fleet_guard_problem' );
