"""The bundle builder: from an organizer spec to upload-ready CodaLab bundles."""
